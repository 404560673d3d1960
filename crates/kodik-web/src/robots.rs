//! robots.txt (RFC 9309) for the fetches the model makes on its own, as the MCP reference
//! `fetch` server does for autonomous calls: a path the site disallows for kodik-web (or for
//! every crawler) is not fetched.
//!
//! Rules: the groups naming our product token (case-insensitive) apply, else the `*` groups,
//! else nothing is disallowed; the longest matching `Allow`/`Disallow` pattern wins, `Allow` on
//! a tie; `*` matches any run of characters and a final `$` anchors the end; `/robots.txt` itself
//! is always allowed. Only the first 500 KiB are read (the minimum RFC 9309 asks parsers to read).

/// The most of a robots.txt that is parsed.
pub const MAX_ROBOTS_BYTES: usize = 500 * 1024;

/// One `Allow` or `Disallow` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// `Allow` (true) or `Disallow` (false).
    pub allow: bool,
    /// The path pattern, as written.
    pub pattern: String,
}

#[derive(Debug, Clone, Default)]
struct Group {
    agents: Vec<String>,
    rules: Vec<Rule>,
}

/// A parsed robots.txt.
#[derive(Debug, Clone, Default)]
pub struct Robots {
    groups: Vec<Group>,
}

/// The verdict for one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Allowed (no rule, or an `Allow` rule won).
    Allowed,
    /// Disallowed by this rule of the group for `agent`.
    Disallowed {
        /// The user-agent line of the group that applied (`*` or our token).
        agent: String,
        /// The winning rule.
        rule: Rule,
    },
}

impl Robots {
    /// Parses robots.txt text; lines that are not `user-agent`, `allow` or `disallow` records
    /// (sitemaps, crawl delays, HTML from a catch-all server) are ignored.
    pub fn parse(text: &str) -> Self {
        let mut end = text.len().min(MAX_ROBOTS_BYTES);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let mut groups: Vec<Group> = Vec::new();
        // A user-agent line right after another (or at the start) adds to the same group.
        let mut collecting_agents = false;
        for line in text[..end].lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            let Some((key, value)) = line.split_once(':') else { continue };
            let (key, value) = (key.trim().to_ascii_lowercase(), value.trim());
            match key.as_str() {
                "user-agent" => {
                    if !collecting_agents {
                        groups.push(Group::default());
                        collecting_agents = true;
                    }
                    if let Some(g) = groups.last_mut() {
                        g.agents.push(value.to_ascii_lowercase());
                    }
                }
                "allow" | "disallow" => {
                    collecting_agents = false;
                    // Rules before any user-agent line belong to no group.
                    let Some(g) = groups.last_mut() else { continue };
                    // An empty `Disallow:` disallows nothing; an empty `Allow:` allows nothing new.
                    if !value.is_empty() {
                        g.rules.push(Rule { allow: key == "allow", pattern: value.to_string() });
                    }
                }
                _ => {}
            }
        }
        Self { groups }
    }

    /// Whether `agent` (our product token, e.g. `kodik-web`) may fetch `path` (path and query,
    /// as sent on the wire).
    pub fn check(&self, agent: &str, path: &str) -> Verdict {
        if path == "/robots.txt" {
            return Verdict::Allowed;
        }
        let agent = agent.to_ascii_lowercase();
        let named: Vec<&Group> = self.groups.iter().filter(|g| g.agents.contains(&agent)).collect();
        let (groups, label) = if named.is_empty() {
            (self.groups.iter().filter(|g| g.agents.iter().any(|a| a == "*")).collect::<Vec<_>>(), "*".to_string())
        } else {
            (named, agent)
        };
        let mut best: Option<&Rule> = None;
        for rule in groups.iter().flat_map(|g| &g.rules) {
            if !matches(&rule.pattern, path) {
                continue;
            }
            let better = match best {
                None => true,
                Some(b) => {
                    rule.pattern.len() > b.pattern.len()
                        || (rule.pattern.len() == b.pattern.len() && rule.allow && !b.allow)
                }
            };
            if better {
                best = Some(rule);
            }
        }
        match best {
            Some(rule) if !rule.allow => Verdict::Disallowed { agent: label, rule: rule.clone() },
            _ => Verdict::Allowed,
        }
    }
}

/// `*` matches any run of characters, a trailing `$` the end of the path; otherwise a pattern
/// matches every path it is a prefix of. Iterative, so a pattern of many `*` cannot blow up.
fn matches(pattern: &str, path: &str) -> bool {
    let (pattern, anchored) = match pattern.strip_suffix('$') {
        Some(p) => (p, true),
        None => (pattern, false),
    };
    let p = pattern.as_bytes();
    let s = path.as_bytes();
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    loop {
        if pi == p.len() && (!anchored || si == s.len()) {
            return true;
        }
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, si));
            pi += 1;
            continue;
        }
        if pi < p.len() && si < s.len() && p[pi] == s[si] {
            pi += 1;
            si += 1;
            continue;
        }
        // Backtrack: let the last `*` swallow one more character.
        match star {
            Some((sp, ss)) if ss < s.len() => {
                star = Some((sp, ss + 1));
                pi = sp + 1;
                si = ss + 1;
            }
            _ => return false,
        }
    }
}

/// The product token of a User-Agent string: `kodik-web/0.1 (+…)` → `kodik-web`.
pub fn product_token(user_agent: &str) -> &str {
    user_agent.split(['/', ' ']).next().unwrap_or(user_agent)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TXT: &str = "\
# comment
User-agent: *
Disallow: /private
Allow: /private/public
Disallow: /*.pdf$
Disallow: /search?

User-agent: kodik-web
User-agent: other-bot
Disallow: /no-agents
Allow: /

Sitemap: https://example.com/sitemap.xml
";

    #[test]
    fn w2_robots_longest_match_wins_and_allow_wins_ties() {
        let r = Robots::parse(TXT);
        let star = |p: &str| r.check("somebot", p);
        assert!(matches!(star("/private/x"), Verdict::Disallowed { ref rule, .. } if rule.pattern == "/private"));
        assert_eq!(star("/private/public/page"), Verdict::Allowed);
        assert!(matches!(star("/files/a.pdf"), Verdict::Disallowed { .. }));
        assert_eq!(star("/files/a.pdf.html"), Verdict::Allowed);
        assert!(matches!(star("/search?q=1"), Verdict::Disallowed { .. }));
        assert_eq!(star("/robots.txt"), Verdict::Allowed);
        let tie = Robots::parse("User-agent: *\nDisallow: /page\nAllow: /page\n");
        assert_eq!(tie.check("x", "/page"), Verdict::Allowed);
    }

    #[test]
    fn w2_robots_a_group_naming_kodik_web_replaces_the_star_group() {
        let r = Robots::parse(TXT);
        // Our own group applies (case-insensitive), not the `*` one.
        assert_eq!(r.check("Kodik-Web", "/private/x"), Verdict::Allowed);
        match r.check("kodik-web", "/no-agents/1") {
            Verdict::Disallowed { agent, rule } => {
                assert_eq!(agent, "kodik-web");
                assert_eq!(rule, Rule { allow: false, pattern: "/no-agents".into() });
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn w2_robots_html_or_empty_files_disallow_nothing() {
        for text in ["", "<html><body>Not found</body></html>", "User-agent: *\nDisallow:\n"] {
            assert_eq!(Robots::parse(text).check("kodik-web", "/anything"), Verdict::Allowed, "{text}");
        }
    }

    #[test]
    fn w2_robots_many_stars_are_matched_without_blowing_up() {
        let pattern = format!("/{}b$", "*a".repeat(200));
        let path = format!("/{}", "a".repeat(5_000));
        assert!(!matches(&pattern, &path));
        assert!(matches("/a*c$", "/abbbc"));
        assert!(!matches("/a*c$", "/abbbcd"));
    }

    #[test]
    fn product_token_is_the_name_before_the_version() {
        assert_eq!(product_token("kodik-web/0.1.0 (+https://x)"), "kodik-web");
        assert_eq!(product_token("plain"), "plain");
    }
}
