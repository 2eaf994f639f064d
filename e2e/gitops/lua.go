package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// Health is what an Argo CD health script returns.
type Health struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// The statuses Argo CD accepts from a script; any other becomes Unknown there.
var validStatuses = map[string]bool{
	"Healthy": true, "Progressing": true, "Degraded": true, "Suspended": true, "Missing": true, "Unknown": true,
}

// argoHealth runs script on obj as Argo CD runs a health.lua from argocd-cm without
// useOpenLibs: only the package, base and table libraries (Argo CD adds a reduced os, which
// these scripts do not use), the object as the global `obj`, one second at most.
func argoHealth(script string, obj map[string]any) (Health, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return Health{}, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, obj))
	if err := l.DoString(script); err != nil {
		return Health{}, err
	}
	t, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return Health{}, fmt.Errorf("the script returned %s, not a table", l.Get(-1).Type())
	}
	h := Health{Status: lua.LVAsString(t.RawGetString("status")), Message: lua.LVAsString(t.RawGetString("message"))}
	if !validStatuses[h.Status] {
		return Health{}, fmt.Errorf("the script returned the status %q, which Argo CD turns into Unknown", h.Status)
	}
	return h, nil
}

// toLua converts a decoded object as Argo CD does: numbers of any width become Lua numbers.
func toLua(l *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case bool:
		return lua.LBool(x)
	case float64:
		return lua.LNumber(x)
	case int64:
		return lua.LNumber(x)
	case int32:
		return lua.LNumber(x)
	case int:
		return lua.LNumber(x)
	case string:
		return lua.LString(x)
	case []any:
		t := l.CreateTable(len(x), 0)
		for _, item := range x {
			t.Append(toLua(l, item))
		}
		return t
	case map[string]any:
		t := l.CreateTable(0, len(x))
		for k, item := range x {
			t.RawSetH(lua.LString(k), toLua(l, item))
		}
		return t
	}
	return lua.LNil
}

// healthScript is the health.lua of kind under dir (dir/<group>/<kind>/health.lua).
func healthScript(dir, group, kind string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, group, kind, "health.lua"))
	return string(b), err
}
