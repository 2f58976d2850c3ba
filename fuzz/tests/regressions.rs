//! Replays every input kept under `fuzz/regressions/<target>/` (crashes found by fuzzing,
//! after their fix) and the seed corpora under `fuzz/seeds/<target>/` through the same
//! target functions the libFuzzer binaries call, on the stable toolchain.

use std::path::Path;

fn replay(dir: &str) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut n = 0;
    for (name, target) in crdplane_fuzz::TARGETS {
        let Ok(entries) = std::fs::read_dir(root.join(name)) else {
            continue;
        };
        let mut files: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        files.sort();
        for f in files {
            let data = std::fs::read(&f).unwrap();
            eprintln!("{name}: {}", f.display());
            target(&data);
            n += 1;
        }
    }
    n
}

#[test]
fn regressions_replay() {
    let n = replay("regressions");
    eprintln!("{n} regression inputs replayed");
}

#[test]
fn seeds_replay() {
    let n = replay("seeds");
    eprintln!("{n} seed inputs replayed");
}

#[test]
fn every_target_has_a_libfuzzer_binary() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("libfuzzer/fuzz_targets");
    for (name, _) in crdplane_fuzz::TARGETS {
        assert!(dir.join(format!("{name}.rs")).exists(), "{name}");
    }
}
