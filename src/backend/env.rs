//! skyconv's environment variables, read one way: unset or blank means "not set"; any other
//! value that does not parse is an `ArgumentError` naming the variable and what it accepts.

use crate::error::{Error, Result};

/// `name` as an unsigned integer at least `min`; `accepted` describes the values for the
/// message ("a positive integer (CPU threads)").
pub fn usize_var(name: &str, min: usize, accepted: &str) -> Result<Option<usize>> {
    let Ok(raw) = std::env::var(name) else {
        return Ok(None);
    };
    let s = raw.trim();
    if s.is_empty() {
        return Ok(None);
    }
    match s.parse::<usize>() {
        Ok(n) if n >= min => Ok(Some(n)),
        _ => Err(Error::value(format!(
            "environment variable {name} must be {accepted}, got {raw:?} (unset it for the \
             default)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_values_name_the_variable() {
        let name = "SKYCONV_TEST_ENV_HELPER";
        std::env::set_var(name, "abc");
        let e = usize_var(name, 1, "a positive integer")
            .unwrap_err()
            .to_string();
        assert!(e.contains(name) && e.contains("abc"), "{e}");
        std::env::set_var(name, "0");
        assert!(usize_var(name, 1, "a positive integer").is_err());
        std::env::set_var(name, " 3 ");
        assert_eq!(usize_var(name, 1, "a positive integer").unwrap(), Some(3));
        std::env::set_var(name, "");
        assert_eq!(usize_var(name, 1, "a positive integer").unwrap(), None);
        std::env::remove_var(name);
        assert_eq!(usize_var(name, 1, "a positive integer").unwrap(), None);
    }
}
