//! The host-side credential store (B10): logins keyed by exact origin. The model sees a label
//! and an opaque id; the values stay on this side and are typed into the page directly.

use std::sync::Mutex;

/// One saved login. Its fields are private so that nothing prints them by accident.
#[derive(Clone)]
pub struct Credential {
    id: String,
    origin: String,
    label: String,
    username: String,
    password: String,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("id", &self.id)
            .field("origin", &self.origin)
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

impl Credential {
    /// The opaque id the model uses.
    pub fn id(&self) -> &str {
        &self.id
    }
    /// The exact origin (`scheme://host[:port]`) it belongs to.
    pub fn origin(&self) -> &str {
        &self.origin
    }
    /// What the model sees.
    pub fn label(&self) -> &str {
        &self.label
    }
    pub(crate) fn username(&self) -> &str {
        &self.username
    }
    pub(crate) fn password(&self) -> &str {
        &self.password
    }
}

/// Saved logins, added by the host (never by the model).
#[derive(Debug, Default)]
pub struct CredentialStore {
    items: Mutex<Vec<Credential>>,
}

impl CredentialStore {
    /// Saves a login for `origin` (e.g. `https://example.com`; a trailing slash is ignored) and
    /// returns its opaque id.
    pub fn add(&self, origin: &str, label: &str, username: &str, password: &str) -> String {
        let mut items = self.items.lock().unwrap_or_else(|p| p.into_inner());
        let id = format!("cred-{}", items.len() + 1);
        items.push(Credential {
            id: id.clone(),
            origin: origin.trim_end_matches('/').to_string(),
            label: label.to_string(),
            username: username.to_string(),
            password: password.to_string(),
        });
        id
    }

    /// The logins saved for exactly `origin`.
    pub fn for_origin(&self, origin: &str) -> Vec<Credential> {
        let items = self.items.lock().unwrap_or_else(|p| p.into_inner());
        items.iter().filter(|c| c.origin == origin.trim_end_matches('/')).cloned().collect()
    }

    /// The login with `id`, whatever its origin.
    pub fn get(&self, id: &str) -> Option<Credential> {
        let items = self.items.lock().unwrap_or_else(|p| p.into_inner());
        items.iter().find(|c| c.id == id).cloned()
    }

    /// Every secret value, so results and logs can be scrubbed of them.
    pub(crate) fn secrets(&self) -> Vec<String> {
        let items = self.items.lock().unwrap_or_else(|p| p.into_inner());
        items.iter().flat_map(|c| [c.password.clone()]).filter(|s| !s.is_empty()).collect()
    }
}
