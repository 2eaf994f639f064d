-- Argo CD health of a TerdutAlertSource (terdut-operator; docs/gitops.md says how to install it).
-- Rendered from crds/src/health.lua.tmpl by `just health`; edit that, not this file.
-- One rule for every terdut kind (docs/design.md §7): kstatus's, plus pause and parking:
--   the pause annotation, or Paused=True by another   Suspended
--   a generation the operator has not observed yet   Progressing
--   Stalled=True                                     Degraded
--   Reconciling=True                                 Progressing
--   Ready=True                                       Healthy
--   Ready=False with a parking reason (PARKED)       Suspended
--   anything else (no status yet, Ready=False)       Progressing
-- Only Lua's base and table libraries: what an argocd-cm script gets without useOpenLibs.
local PAUSE = "terdut.ryuvia.com/paused"
-- Ready reasons that mean "parked as the spec asks", Suspended like a paused Deployment:
-- spec.management ObserveOnly with changes planned (status.plan).
local PARKED = { ObserveOnly = true }

local hs = { status = "Progressing", message = "waiting for terdut-operator to report" }

local function condition(conditions, type_)
  for _, c in ipairs(conditions) do
    if c.type == type_ then
      return c
    end
  end
  return nil
end

local function say(c)
  if c.message ~= nil and c.message ~= "" then
    return c.reason .. ": " .. c.message
  end
  return c.reason
end

local annotations = obj.metadata.annotations
if annotations ~= nil and annotations[PAUSE] == "true" then
  hs.status = "Suspended"
  hs.message = "paused by the annotation " .. PAUSE .. "=true"
  return hs
end

local status = obj.status
if status == nil then
  return hs
end
local conditions = status.conditions or {}
-- Paused by something other than its own annotation (an alert source whose team is paused).
-- PausedByAnnotation without the annotation is a resume the operator has not seen yet.
local paused = condition(conditions, "Paused")
if paused ~= nil and paused.status == "True" and paused.reason ~= "PausedByAnnotation" then
  hs.status = "Suspended"
  hs.message = say(paused)
  return hs
end
local generation = obj.metadata.generation
if generation ~= nil and status.observedGeneration ~= generation then
  hs.message = "waiting for terdut-operator to observe generation " .. tostring(generation)
  return hs
end
local stalled = condition(conditions, "Stalled")
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = say(stalled)
  return hs
end
local reconciling = condition(conditions, "Reconciling")
if reconciling ~= nil and reconciling.status == "True" then
  hs.message = say(reconciling)
  return hs
end
local ready = condition(conditions, "Ready")
if ready == nil then
  return hs
end
if ready.status == "True" then
  hs.status = "Healthy"
elseif PARKED[ready.reason] then
  hs.status = "Suspended"
end
hs.message = say(ready)
return hs
