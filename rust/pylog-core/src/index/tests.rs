//! Tests of both indexes and their shared machinery.

use super::*;
use tempfile::TempDir;

fn offset_index(dir: &TempDir, base: i64, max: u64) -> OffsetIndex {
    OffsetIndex::open(
        dir.path().join(format!("{base:020}.index")),
        base,
        max,
        true,
    )
    .unwrap()
}

fn time_index(dir: &TempDir, base: i64, max: u64) -> TimeIndex {
    TimeIndex::open(
        dir.path().join(format!("{base:020}.timeindex")),
        base,
        max,
        true,
    )
    .unwrap()
}

#[test]
fn new_file_is_preallocated_rounded_down() {
    let dir = TempDir::new().unwrap();
    let idx = offset_index(&dir, 100, 1003);
    assert_eq!(fs::metadata(idx.path()).unwrap().len(), 1000);
    assert_eq!(idx.max_entries(), 125);
    assert_eq!(idx.entries(), 0);
    assert_eq!(idx.last_offset(), 100);
    let t = time_index(&dir, 100, 1003);
    assert_eq!(fs::metadata(t.path()).unwrap().len(), 996);
    assert_eq!(t.max_entries(), 83);
    assert_eq!(t.last_entry(), (-1, 100));
}

#[test]
fn append_writes_kafka_layout() {
    let dir = TempDir::new().unwrap();
    let mut idx = offset_index(&dir, 1000, 80);
    idx.append(1005, 4200).unwrap();
    idx.append(1010, 9000).unwrap();
    let data = idx.data().unwrap();
    assert_eq!(
        &data[..16],
        &[0, 0, 0, 5, 0, 0, 0x10, 0x68, 0, 0, 0, 10, 0, 0, 0x23, 0x28]
    );
    assert_eq!(idx.entry(1).unwrap(), Some((1010, 9000)));
    assert_eq!(idx.entry(2).unwrap(), None);
    assert_eq!(idx.size_in_bytes(), 16);

    let mut t = time_index(&dir, 1000, 120);
    t.maybe_append(1_700_000_000_000, 1005, false).unwrap();
    let data = t.data().unwrap();
    let mut want = 1_700_000_000_000i64.to_be_bytes().to_vec();
    want.extend_from_slice(&5u32.to_be_bytes());
    assert_eq!(&data[..12], &want[..]);
    assert_eq!(t.entry(0).unwrap(), Some((1_700_000_000_000, 1005)));
}

#[test]
fn append_checks_monotonicity_overflow_and_room() {
    let dir = TempDir::new().unwrap();
    let mut idx = offset_index(&dir, 50, 24);
    assert!(matches!(
        idx.append(49, 0),
        Err(Error::IndexOffsetOverflow(_))
    ));
    assert!(matches!(
        idx.append(50 + i32::MAX as i64 + 1, 0),
        Err(Error::IndexOffsetOverflow(_))
    ));
    idx.append(50, 0).unwrap(); // first entry may be the base offset
    idx.append(60, 100).unwrap();
    assert!(matches!(idx.append(60, 200), Err(Error::InvalidOffset(_))));
    assert!(matches!(idx.append(59, 200), Err(Error::InvalidOffset(_))));
    assert!(matches!(idx.append(70, 99), Err(Error::InvalidOffset(_))));
    assert!(matches!(idx.append(70, -1), Err(Error::InvalidOffset(_))));
    idx.append(70, 100).unwrap(); // same position is fine
    assert!(idx.is_full());
    assert!(matches!(idx.append(80, 300), Err(Error::InvalidOffset(_))));
    assert_eq!(idx.entries(), 3);
}

#[test]
fn lookup_floor_semantics() {
    let dir = TempDir::new().unwrap();
    let mut idx = offset_index(&dir, 0, 1 << 20);
    assert_eq!(idx.lookup(10).unwrap(), (0, 0));
    for i in 1..=5000i64 {
        idx.append(i * 10, i * 100).unwrap();
    }
    assert_eq!(idx.lookup(5).unwrap(), (0, 0));
    assert_eq!(idx.lookup(10).unwrap(), (10, 100));
    assert_eq!(idx.lookup(19).unwrap(), (10, 100));
    assert_eq!(idx.lookup(25_555).unwrap(), (25_550, 255_500));
    assert_eq!(idx.lookup(49_995).unwrap(), (49_990, 499_900));
    assert_eq!(idx.lookup(50_000).unwrap(), (50_000, 500_000));
    assert_eq!(idx.lookup(i64::MAX).unwrap(), (50_000, 500_000));
    assert_eq!(idx.lookup(i64::MIN).unwrap(), (0, 0));
    // Every target, warm and cold, against a linear floor.
    for t in (0..50_020).step_by(7) {
        let k = (t / 10).min(5000);
        let want = if t < 10 {
            (0, 0)
        } else {
            (k * 10, (k * 100) as u32)
        };
        assert_eq!(idx.lookup(t).unwrap(), want, "target {t}");
    }
    let mut out = Vec::new();
    idx.lookup_many(&[5, 19, 50_000], &mut out).unwrap();
    assert_eq!(out, vec![(0, 0), (10, 100), (50_000, 500_000)]);
    // Batched lookups answer exactly as single ones, warm, cold and none mixed.
    let targets: Vec<i64> = (0..3000).map(|i| (i * 7919) % 50_050 - 20).collect();
    out.clear();
    idx.lookup_many(&targets, &mut out).unwrap();
    let single: Vec<_> = targets.iter().map(|&t| idx.lookup(t).unwrap()).collect();
    assert_eq!(out, single);
}

#[test]
fn lookup_small_and_boundary_sizes() {
    // Sizes around the warm-section boundary (1024 entries of 8 bytes).
    for n in [1usize, 2, 3, 1023, 1024, 1025, 1026, 2050] {
        let dir = TempDir::new().unwrap();
        let mut idx = offset_index(&dir, 7, 1 << 16);
        for i in 0..n {
            idx.append(7 + 2 * i as i64 + 1, 3 * i as i64).unwrap();
        }
        for t in 0..(2 * n as i64 + 12) {
            let rel = t - 7;
            let want = if rel < 1 {
                (7, 0)
            } else {
                let k = ((rel - 1) / 2).min(n as i64 - 1);
                (7 + 2 * k + 1, 3 * k as u32)
            };
            assert_eq!(idx.lookup(t).unwrap(), want, "n {n} target {t}");
        }
    }
}

#[test]
fn time_index_takes_a_larger_timestamp_at_the_same_offset() {
    // Kafka appends it: the batch's max timestamp can be found after an
    // entry for the same offset was written (e.g. on roll).
    let dir = tempfile::tempdir().unwrap();
    let mut t = TimeIndex::open(dir.path().join("0.timeindex"), 0, 120, true).unwrap();
    t.maybe_append(1000, 100, false).unwrap();
    t.maybe_append(1500, 100, false).unwrap();
    assert_eq!(t.entries(), 2);
    assert_eq!(t.lookup(1600).unwrap(), (1500, 100));
    t.sanity_check().unwrap();
}

#[test]
fn time_index_maybe_append_and_lookup() {
    let dir = TempDir::new().unwrap();
    let mut t = time_index(&dir, 100, 12 * 4);
    t.maybe_append(-1, 100, false).unwrap(); // not above "no timestamp": skipped
    assert_eq!(t.entries(), 0);
    t.maybe_append(1000, 100, false).unwrap();
    t.maybe_append(1000, 105, false).unwrap(); // equal timestamp: skipped
    assert_eq!(t.entries(), 1);
    assert!(matches!(
        t.maybe_append(999, 110, false),
        Err(Error::InvalidOffset(_))
    ));
    assert!(matches!(
        t.maybe_append(2000, 99, false),
        Err(Error::InvalidOffset(_))
    ));
    t.maybe_append(2000, 110, false).unwrap();
    t.maybe_append(3000, 120, false).unwrap();
    t.maybe_append(4000, 130, false).unwrap();
    assert!(t.is_full());
    assert!(matches!(
        t.maybe_append(4000, 130, false),
        Err(Error::InvalidOffset(_))
    ));
    t.maybe_append(4000, 130, true).unwrap(); // nothing to add: fine when full
    assert!(matches!(
        t.maybe_append(5000, 140, true),
        Err(Error::InvalidOffset(_))
    ));
    assert_eq!(t.lookup(999).unwrap(), (-1, 100));
    assert_eq!(t.lookup(1000).unwrap(), (1000, 100));
    assert_eq!(t.lookup(2500).unwrap(), (2000, 110));
    assert_eq!(t.lookup(10_000).unwrap(), (4000, 130));
    assert_eq!(t.last_entry(), (4000, 130));
}

#[test]
fn time_index_lookup_across_warm_boundary() {
    let dir = TempDir::new().unwrap();
    let mut t = time_index(&dir, 0, 1 << 20);
    for i in 1..3000i64 {
        t.maybe_append(i * 1000, i, false).unwrap();
    }
    for ts in (0..3_001_000).step_by(333) {
        let i = ts / 1000;
        let want = if i == 0 {
            (-1, 0)
        } else {
            (i.min(2999) * 1000, i.min(2999))
        };
        assert_eq!(t.lookup(ts).unwrap(), want);
    }
}

#[test]
fn truncate_to_and_truncate() {
    let dir = TempDir::new().unwrap();
    let mut idx = offset_index(&dir, 0, 800);
    for i in 1..=10 {
        idx.append(i * 10, i * 100).unwrap();
    }
    idx.truncate_to(55).unwrap();
    assert_eq!(idx.entries(), 5);
    assert_eq!(idx.last_offset(), 50);
    idx.truncate_to(50).unwrap(); // drops offset 50 itself
    assert_eq!(idx.entries(), 4);
    idx.truncate_to(1000).unwrap();
    assert_eq!(idx.entries(), 4);
    // Dropped entries are zeroed, so appending again is clean.
    assert!(idx.data().unwrap()[32..80].iter().all(|&b| b == 0));
    idx.append(45, 450).unwrap();
    assert_eq!(idx.lookup(47).unwrap(), (45, 450));
    idx.truncate().unwrap();
    assert_eq!(idx.entries(), 0);
    assert_eq!(idx.lookup(47).unwrap(), (0, 0));

    let mut t = time_index(&dir, 0, 240);
    for i in 1..=10 {
        t.maybe_append(i * 1000, i * 10, false).unwrap();
    }
    t.truncate_to(35).unwrap();
    assert_eq!(t.entries(), 3);
    assert_eq!(t.last_entry(), (3000, 30));
    t.truncate_to(0).unwrap();
    assert_eq!(t.entries(), 0);
}

#[test]
fn resize_trim_and_reopen() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("0.index");
    let mut idx = OffsetIndex::open(&path, 0, 8000, true).unwrap();
    for i in 1..=10 {
        idx.append(i, i * 10).unwrap();
    }
    assert!(!idx.resize(8004).unwrap()); // rounds to the same length
    assert!(idx.resize(16_000).unwrap());
    assert_eq!(idx.max_entries(), 2000);
    assert_eq!(idx.lookup(5).unwrap(), (5, 50));
    idx.trim_to_valid_size().unwrap();
    assert_eq!(fs::metadata(&path).unwrap().len(), 80);
    assert!(idx.is_full());
    assert!(idx.resize(40).unwrap()); // shrinking below the entries drops them
    assert_eq!(idx.entries(), 5);
    idx.resize(8000).unwrap();
    idx.flush().unwrap();
    drop(idx); // unclean: the zero tail stays

    let idx = OffsetIndex::open(&path, 0, 8000, true).unwrap();
    assert_eq!(idx.entries(), 5);
    assert_eq!(idx.max_entries(), 1000);
    assert_eq!(idx.last_offset(), 5);
    drop(idx);

    let mut idx = OffsetIndex::open(&path, 0, 8000, true).unwrap();
    idx.close().unwrap();
    assert_eq!(fs::metadata(&path).unwrap().len(), 40);
    assert!(matches!(idx.lookup(1), Err(Error::Io(_))));
    assert!(matches!(idx.append(9, 9), Err(Error::Io(_))));
    let ro = OffsetIndex::open(&path, 0, 0, false).unwrap();
    assert_eq!(ro.entries(), 5);
    assert!(ro.is_full());
    assert_eq!(ro.lookup(3).unwrap(), (3, 30));
}

#[test]
fn reopen_counts_zero_entry_zero_correctly() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("0.index");
    let mut idx = OffsetIndex::open(&path, 0, 80, true).unwrap();
    idx.append(0, 0).unwrap();
    idx.append(3, 100).unwrap();
    drop(idx);
    assert_eq!(OffsetIndex::open(&path, 0, 80, true).unwrap().entries(), 2);
    // A fresh, empty preallocated index reopens empty.
    let empty = dir.path().join("1.index");
    drop(OffsetIndex::open(&empty, 0, 80, true).unwrap());
    assert_eq!(OffsetIndex::open(&empty, 0, 80, true).unwrap().entries(), 0);
    // A trimmed index holding just (base, 0) keeps it.
    let one = dir.path().join("2.index");
    let mut idx = OffsetIndex::open(&one, 0, 80, true).unwrap();
    idx.append(0, 0).unwrap();
    idx.close().unwrap();
    assert_eq!(OffsetIndex::open(&one, 0, 80, true).unwrap().entries(), 1);
    // Truncated-then-dropped entries do not come back.
    let mut idx = OffsetIndex::open(&path, 0, 80, true).unwrap();
    idx.append(5, 200).unwrap();
    idx.append(7, 300).unwrap();
    idx.truncate_to(5).unwrap();
    drop(idx);
    assert_eq!(OffsetIndex::open(&path, 0, 80, true).unwrap().entries(), 2);
    // The one ambiguous case: a lone (base, 0) entry before a zero tail
    // reads as empty (every lookup answers the same either way).
    let mut idx = OffsetIndex::open(&path, 0, 80, true).unwrap();
    idx.truncate_to(3).unwrap();
    drop(idx);
    let idx = OffsetIndex::open(&path, 0, 80, true).unwrap();
    assert_eq!(idx.entries(), 0);
    assert_eq!(idx.lookup(2).unwrap(), (0, 0));
}

#[test]
fn zero_length_and_read_only() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("0.index");
    let mut idx = OffsetIndex::open(&path, 0, 0, true).unwrap();
    assert_eq!(idx.max_entries(), 0);
    assert!(matches!(idx.append(1, 1), Err(Error::InvalidOffset(_))));
    idx.sanity_check().unwrap();
    assert!(idx.resize(80).unwrap());
    idx.append(1, 1).unwrap();
    idx.close().unwrap();
    let mut ro = OffsetIndex::open(&path, 0, 0, false).unwrap();
    assert!(matches!(ro.append(2, 2), Err(Error::Io(_))));
    assert!(matches!(ro.resize(800), Err(Error::Io(_))));
    ro.flush().unwrap();
    ro.sanity_check().unwrap();
    ro.close().unwrap();
    assert!(matches!(
        OffsetIndex::open(dir.path().join("missing.index"), 0, 0, false),
        Err(Error::Io(_))
    ));
}

#[test]
fn sanity_check_finds_corruption() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("0.index");
    let mut idx = OffsetIndex::open(&path, 100, 80, true).unwrap();
    idx.append(110, 10).unwrap();
    idx.append(120, 20).unwrap();
    idx.sanity_check().unwrap();
    idx.close().unwrap();

    // Offsets that go back.
    let mut bytes = fs::read(&path).unwrap();
    bytes[8..12].copy_from_slice(&5u32.to_be_bytes());
    fs::write(&path, &bytes).unwrap();
    let idx = OffsetIndex::open(&path, 100, 80, false).unwrap();
    assert!(matches!(idx.sanity_check(), Err(Error::CorruptIndex(_))));

    // Positions that go back.
    bytes[8..12].copy_from_slice(&20u32.to_be_bytes());
    bytes[12..16].copy_from_slice(&5u32.to_be_bytes());
    fs::write(&path, &bytes).unwrap();
    let idx = OffsetIndex::open(&path, 100, 80, false).unwrap();
    assert!(matches!(idx.sanity_check(), Err(Error::CorruptIndex(_))));

    // A length that is not whole entries.
    bytes[12..16].copy_from_slice(&25u32.to_be_bytes());
    bytes.push(1);
    fs::write(&path, &bytes).unwrap();
    let idx = OffsetIndex::open(&path, 100, 80, false).unwrap();
    assert_eq!(idx.entries(), 2);
    assert!(matches!(idx.sanity_check(), Err(Error::CorruptIndex(_))));

    // Time index: timestamps that go back.
    let tpath = dir.path().join("0.timeindex");
    let mut t = TimeIndex::open(&tpath, 0, 120, true).unwrap();
    t.maybe_append(10, 1, false).unwrap();
    t.maybe_append(20, 2, false).unwrap();
    t.sanity_check().unwrap();
    t.close().unwrap();
    let mut bytes = fs::read(&tpath).unwrap();
    bytes[12..20].copy_from_slice(&5i64.to_be_bytes());
    fs::write(&tpath, &bytes).unwrap();
    let t = TimeIndex::open(&tpath, 0, 120, false).unwrap();
    assert!(matches!(t.sanity_check(), Err(Error::CorruptIndex(_))));
}

#[test]
fn rename_keeps_mapping() {
    let dir = TempDir::new().unwrap();
    let mut idx = offset_index(&dir, 0, 80);
    idx.append(1, 1).unwrap();
    let to = dir.path().join("00000000000000000000.index.deleted");
    idx.rename_to(&to).unwrap();
    assert_eq!(idx.path(), to.as_path());
    idx.append(2, 2).unwrap();
    assert_eq!(idx.lookup(2).unwrap(), (2, 2));
    idx.close().unwrap();
    assert_eq!(fs::metadata(&to).unwrap().len(), 16);
}

#[test]
fn reset_grows_back_to_max_size() {
    let dir = TempDir::new().unwrap();
    let mut t = time_index(&dir, 0, 120);
    t.maybe_append(5, 1, false).unwrap();
    t.trim_to_valid_size().unwrap();
    assert!(t.is_full());
    t.reset().unwrap();
    assert_eq!(t.entries(), 0);
    assert_eq!(t.max_entries(), 10);
}

#[test]
fn read_entries_reads_without_mapping_and_checks_as_sanity_check_does() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("0.index");
    let mut idx = OffsetIndex::open(&path, 100, 80, true).unwrap();
    idx.append(110, 10).unwrap();
    idx.append(120, 20).unwrap();
    idx.flush().unwrap();
    // Still preallocated (a zero tail): counted as the mapped index counts.
    assert_eq!(
        read_entries::<OffsetLayout>(&path, 100).unwrap(),
        vec![(110, 10), (120, 20)]
    );
    idx.close().unwrap();
    assert_eq!(read_entries::<OffsetLayout>(&path, 100).unwrap().len(), 2);
    let mut bytes = fs::read(&path).unwrap();
    bytes[8..12].copy_from_slice(&5u32.to_be_bytes()); // offsets that go back
    fs::write(&path, &bytes).unwrap();
    assert!(matches!(
        read_entries::<OffsetLayout>(&path, 100),
        Err(Error::CorruptIndex(_))
    ));
    bytes.push(1); // not whole entries
    fs::write(&path, &bytes).unwrap();
    assert!(matches!(
        read_entries::<OffsetLayout>(&path, 100),
        Err(Error::CorruptIndex(_))
    ));

    let tpath = dir.path().join("0.timeindex");
    let mut t = TimeIndex::open(&tpath, 100, 120, true).unwrap();
    t.maybe_append(5000, 110, false).unwrap();
    t.maybe_append(6000, 130, false).unwrap();
    t.flush().unwrap();
    assert_eq!(
        read_entries::<TimeLayout>(&tpath, 100).unwrap(),
        vec![(5000, 110), (6000, 130)]
    );
    assert!(matches!(
        read_entries::<TimeLayout>(&dir.path().join("missing"), 0),
        Err(Error::Io(_))
    ));
}
