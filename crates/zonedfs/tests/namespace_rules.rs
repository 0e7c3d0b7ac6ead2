//! The namespace's POSIX rules as the C API and RocksDB reach them: a handle closes once, lifetime hints stay
//! within RocksDB's six, a new name needs an existing parent directory, a directory renames with everything in
//! it (and stays renamed after a remount), and listing a file is ENOTDIR.

mod common;

use common::{on_new_fs, simulation};
use zonelab_zonedfs::{FsOptions, OpenMode, ZonedFs, ZonedFsError};

/// The errno a refused call gives.
fn errno<T: std::fmt::Debug>(result: Result<T, ZonedFsError>) -> i32 {
    result.expect_err("refused").errno()
}

#[test]
fn handles_hints_parents_and_directory_renames_follow_posix() {
    let mut simulation = simulation(12);
    on_new_fs(&mut simulation, FsOptions::default(), async |fs| {
        fs.mkdir("/d").await.expect("mkdir");
        let id = fs.open_write("/d/a.sst", 2, OpenMode::Truncate).await.expect("create");
        fs.append(id, b"hello").await.expect("append");
        fs.close(id).await.expect("close");
        assert_eq!(errno(fs.close(id).await), 9, "a second close is EBADF");
        assert_eq!(errno(fs.close(12345).await), 9, "an unknown id is EBADF");
        assert_eq!(errno(fs.open_write("/d/b.sst", 99, OpenMode::Truncate).await), 22, "hint 99");
        let writer = fs.open_write("/d/b.sst", 5, OpenMode::Truncate).await.expect("hint 5 is extreme");
        assert_eq!(errno(fs.set_lifetime(writer, 6)), 22, "hint 6");
        fs.close(writer).await.expect("close");
        assert_eq!(errno(fs.open_write("/nodir/x", 0, OpenMode::Truncate).await), 2, "no parent: ENOENT");
        assert_eq!(errno(fs.mkdir("/d/e/f").await), 2, "mkdir without its parent: ENOENT");
        assert_eq!(errno(fs.mkdir("/d/a.sst/x").await), 20, "a file as a parent: ENOTDIR");
        assert_eq!(errno(fs.list("/d/a.sst")), 20, "listing a file: ENOTDIR");
        assert_eq!(errno(fs.rename("/d/a.sst", "/nodir/a.sst").await), 2, "rename into no directory");

        fs.mkdir("/d/sub").await.expect("mkdir");
        let id = fs.open_write("/d/sub/c.sst", 0, OpenMode::Truncate).await.expect("create");
        fs.close(id).await.expect("close");
        assert_eq!(errno(fs.rename("/d", "/d/sub/inside").await), 22, "into itself");
        fs.rename("/d", "/e").await.expect("a directory renames");
        assert_eq!(fs.list("/e").expect("list"), vec!["a.sst", "b.sst", "sub"]);
        assert_eq!(fs.list("/e/sub").expect("list"), vec!["c.sst"]);
        assert!(!fs.exists("/d") && !fs.exists("/d/a.sst"));
        let id = fs.open_read("/e/a.sst").expect("moved");
        assert_eq!(fs.read(id, 0, 5).await.expect("read"), b"hello");
        // A length past the end (the C API's SIZE_MAX) reads to the end, allocating no more than that.
        assert_eq!(fs.read(id, 2, u64::MAX).await.expect("read to the end"), b"llo");
        fs.close(id).await.expect("close");
        assert_eq!(fs.check(), Vec::<String>::new());
    });
    // The rename is in the journal: a remount finds the same tree.
    let host = simulation.host();
    let found = std::rc::Rc::new(std::cell::RefCell::new(None));
    let out = std::rc::Rc::clone(&found);
    simulation.spawn(async move {
        let fs = ZonedFs::mount(host, FsOptions::default()).await.expect("mount");
        *out.borrow_mut() = Some((fs.directories(), fs.files().into_iter().map(|file| file.name).collect::<Vec<_>>()));
    });
    simulation.run();
    let (dirs, files) = found.borrow_mut().take().expect("mounted");
    assert_eq!(dirs, vec!["/", "/e", "/e/sub"]);
    assert_eq!(files, vec!["/e/a.sst", "/e/b.sst", "/e/sub/c.sst"]);
}
