//! The lock: the strict reader never panics, and a lock it accepts is exactly the
//! canonical text of what it read (serializing it again gives the same bytes). The
//! writer and the reader agree: any lock-shaped JSON, sealed, reads back equal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use runner::lock::{LOCK_TYPE, Lock, jcs};

fuzz_target!(|data: &[u8]| {
    if let Ok(lock) = Lock::parse(data) {
        let text = jcs::to_string(&lock).expect("an accepted lock serializes");
        assert_eq!(
            text.as_bytes(),
            data,
            "an accepted lock re-serializes to other bytes"
        );
        assert_eq!(lock.rollup().expect("rollup"), lock.lock_sha256);
        // Sealing an accepted lock changes nothing.
        let (sealed, sealed_text) = lock.clone().seal().expect("seal");
        assert_eq!(sealed, lock);
        assert_eq!(sealed_text, text);
    }
    // Random bytes almost never carry a lock_sha256 that re-derives; reseal whatever
    // has the lock's shape, so the reader sees every writable lock.
    if let Ok(mut lock) = serde_json::from_slice::<Lock>(data) {
        // The writer only ever writes the one lock type.
        lock.lock_type = LOCK_TYPE.to_owned();
        if let Ok((sealed, text)) = lock.seal() {
            match Lock::parse(text.as_bytes()) {
                Ok(read) => assert_eq!(read, sealed, "a sealed lock reads back different"),
                Err(e) => panic!("the reader refuses a lock the writer sealed: {e}\n{text}"),
            }
        }
    }
});
