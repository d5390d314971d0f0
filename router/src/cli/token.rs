//! `token create|list|revoke` and `whoami`: the API's tokens, made and revoked at run time
//! with an admin token, printed as YAML in the shape of the other commands.

use web::{TokenCreated, TokenEntry, TokenList, WhoAmI};

use super::client::{json, Client, CtlError};
use super::Connect;

/// Milliseconds since the Unix epoch as UTC `YYYY-MM-DDTHH:MM:SSZ`.
pub(crate) fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX);
    let rest = secs % 86_400;
    // Days since 1970-01-01 to a civil date (proleptic Gregorian calendar).
    let z = days.saturating_add(719_468);
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// The `created:` value of a token: its time, or `unknown`.
fn created(ms: Option<u64>) -> String {
    ms.map_or_else(|| "unknown".to_owned(), utc)
}

/// `token create --name N [--role R]`: the new token, its secret shown this once.
pub(super) async fn create(c: &Connect, name: &str, role: &str) -> Result<String, CtlError> {
    let cl = Client::new(c, "create", "token")?;
    let v = cl
        .post(
            "/api/v1/tokens",
            serde_json::json!({ "name": name, "role": role }),
        )
        .await?;
    if c.json {
        return Ok(json(&v));
    }
    let t: TokenCreated = cl.model(v)?;
    Ok(format!(
        "token create:\n    - name: {}\n      role: {}\n      created: {}\n      secret: \"{}\"\n",
        t.name,
        t.role,
        utc(t.created_ms),
        t.secret
    ))
}

/// `token list`: every token's name, role and creation time (never a secret).
pub(super) async fn list(c: &Connect) -> Result<String, CtlError> {
    let cl = Client::new(c, "list", "token")?;
    let v = cl.get("/api/v1/tokens").await?;
    if c.json {
        return Ok(json(&v));
    }
    let m: TokenList = cl.model(v)?;
    let mut out = String::from("token list:\n");
    for TokenEntry {
        name,
        role,
        created_ms,
    } in &m.tokens
    {
        out.push_str(&format!(
            "    - name: {name}\n      role: {role}\n      created: {}\n",
            created(*created_ms)
        ));
    }
    Ok(out)
}

/// `token revoke NAME`: prints nothing (the answer with `--json`).
pub(super) async fn revoke(c: &Connect, name: &str) -> Result<String, CtlError> {
    let cl = Client::new(c, "revoke", "token")?;
    let v = cl.delete(&format!("/api/v1/tokens/{name}")).await?;
    Ok(if c.json { json(&v) } else { String::new() })
}

/// `whoami`: the name and role of the token given.
pub(super) async fn whoami(c: &Connect) -> Result<String, CtlError> {
    let cl = Client::new(c, "show", "whoami")?;
    let v = cl.get("/api/v1/whoami").await?;
    if c.json {
        return Ok(json(&v));
    }
    let w: WhoAmI = cl.model(v)?;
    Ok(format!(
        "whoami:\n    name: {}\n    role: {}\n",
        w.name, w.role
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_print_as_utc() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_764_254_096_789), "2025-11-27T14:34:56Z");
        assert_eq!(created(None), "unknown");
    }
}
