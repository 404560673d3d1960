//! File writes that never leave a half-written file behind (E12).

use std::io::Write as _;
use std::path::Path;

/// Writes `bytes` to `path` atomically: a temporary file in the same folder is written,
/// flushed to disk and renamed over the target. An existing file's permissions are kept.
/// Missing parent folders are created when `create_parents` is set.
pub fn write_atomic(path: &Path, bytes: &[u8], create_parents: bool) -> std::io::Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if create_parents {
        std::fs::create_dir_all(parent)?;
    }
    let existing_perms = std::fs::metadata(path).ok().map(|m| m.permissions());
    let mut tmp = tempfile::Builder::new().prefix(".kodik-").suffix(".tmp").tempfile_in(parent)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    if let Some(perms) = existing_perms {
        std::fs::set_permissions(tmp.path(), perms)?;
    }
    tmp.persist(path).map_err(|e| e.error)?;
    // Make the rename itself durable; a failure here cannot lose data, so it is not reported.
    if let Ok(dir) = std::fs::File::open(parent) {
        let _ = dir.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn e12_atomic_write_keeps_permissions_and_leaves_no_temp_files() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("run.sh");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o751)).unwrap();
        write_atomic(&p, b"new", false).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o751);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn c1_creates_parents_when_asked() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a/b/c.txt");
        assert!(write_atomic(&p, b"x", false).is_err());
        write_atomic(&p, b"x", true).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"x");
    }
}
