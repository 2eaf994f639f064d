//! The rows of terdut-api.md as route templates: the stable `endpoint` label of the metrics
//! and the only place a path is spelled, so a change in the real server's routes is a change
//! here.

use reqwest::Method;

/// One call of the contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endpoint {
    Healthz,
    Readyz,
    WhoAmI,
    CreateTeam,
    GetTeam,
    RenameTeam,
    SetOidcGroups,
    DeleteTeam,
    GetEscalation,
    PutEscalation,
    DeleteEscalation,
    ListSwitches,
    CreateSwitch,
    UpdateSwitch,
    DeleteSwitch,
    CreateIntegration,
    GetIntegration,
    RenameIntegration,
    DeleteIntegration,
}

impl Endpoint {
    pub const ALL: [Self; 19] = [
        Self::Healthz,
        Self::Readyz,
        Self::WhoAmI,
        Self::CreateTeam,
        Self::GetTeam,
        Self::RenameTeam,
        Self::SetOidcGroups,
        Self::DeleteTeam,
        Self::GetEscalation,
        Self::PutEscalation,
        Self::DeleteEscalation,
        Self::ListSwitches,
        Self::CreateSwitch,
        Self::UpdateSwitch,
        Self::DeleteSwitch,
        Self::CreateIntegration,
        Self::GetIntegration,
        Self::RenameIntegration,
        Self::DeleteIntegration,
    ];

    /// `METHOD /path/{placeholder}`: the metrics label, identical to the stand-in's call-count
    /// keys.
    pub fn template(self) -> &'static str {
        match self {
            Self::Healthz => "GET /healthz",
            Self::Readyz => "GET /readyz",
            Self::WhoAmI => "GET /api/v1/whoami",
            Self::CreateTeam => "POST /api/v1/teams",
            Self::GetTeam => "GET /api/v1/teams/{id}",
            Self::RenameTeam => "PUT /api/v1/teams/{id}/name",
            Self::SetOidcGroups => "PUT /api/v1/teams/{id}/oidc-groups",
            Self::DeleteTeam => "DELETE /api/v1/teams/{id}",
            Self::GetEscalation => "GET /api/v1/teams/{id}/escalation",
            Self::PutEscalation => "PUT /api/v1/teams/{id}/escalation",
            Self::DeleteEscalation => "DELETE /api/v1/teams/{id}/escalation",
            Self::ListSwitches => "GET /api/v1/teams/{id}/deadman-switches",
            Self::CreateSwitch => "POST /api/v1/teams/{id}/deadman-switches",
            Self::UpdateSwitch => "PUT /api/v1/teams/{id}/deadman-switches/{sid}",
            Self::DeleteSwitch => "DELETE /api/v1/teams/{id}/deadman-switches/{sid}",
            Self::CreateIntegration => "POST /api/v1/teams/{id}/integrations",
            Self::GetIntegration => "GET /api/v1/teams/{id}/integrations/{iid}",
            Self::RenameIntegration => "PATCH /api/v1/teams/{id}/integrations/{iid}",
            Self::DeleteIntegration => "DELETE /api/v1/teams/{id}/integrations/{iid}",
        }
    }

    pub fn method(self) -> Method {
        let (method, _) = self.split();
        match method {
            "GET" => Method::GET,
            "POST" => Method::POST,
            "PUT" => Method::PUT,
            "PATCH" => Method::PATCH,
            _ => Method::DELETE,
        }
    }

    /// The path with `{id}`, `{sid}` and `{iid}` filled in, in that order.
    pub fn path(self, ids: &[i64]) -> String {
        let (_, template) = self.split();
        let mut out = String::with_capacity(template.len() + 16);
        let mut ids = ids.iter();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let close = rest[open..].find('}').map_or(rest.len(), |c| open + c + 1);
            if let Some(id) = ids.next() {
                out.push_str(&id.to_string());
            }
            rest = &rest[close..];
        }
        out.push_str(rest);
        out
    }

    /// Whether the call carries the operator key: every `/api/` call does, the probes do not.
    pub fn authenticated(self) -> bool {
        !matches!(self, Self::Healthz | Self::Readyz)
    }

    fn split(self) -> (&'static str, &'static str) {
        self.template().split_once(' ').unwrap_or(("GET", "/"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_placeholders_in_order() {
        assert_eq!(
            Endpoint::DeleteSwitch.path(&[42, 7]),
            "/api/v1/teams/42/deadman-switches/7"
        );
        assert_eq!(Endpoint::CreateTeam.path(&[]), "/api/v1/teams");
        assert_eq!(Endpoint::DeleteSwitch.method(), Method::DELETE);
        assert_eq!(Endpoint::RenameIntegration.method(), Method::PATCH);
    }

    #[test]
    fn templates_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for e in Endpoint::ALL {
            assert!(seen.insert(e.template()), "{e:?}");
        }
    }
}
