;; Wasm exception handling (the proposal the scientific guest needs): `run` throws a tag
;; it catches itself (exit code 5 from the payload), so a runner built without
;; exceptions support fails to load it.
(module
  (tag $oops (param i32))
  (func $inner (throw $oops (i32.const 5)))
  (func (export "run") (result i32)
    (block $caught (result i32)
      (try_table (catch $oops $caught)
        (call $inner))
      (i32.const 0))))
