# Issue 20: a guest writing far more small files than /out may hold. The run is
# output_limit, and the result keeps at most out_max_files entries (the test policy's
# 64): it used to keep the cap plus one (the entry whose creation proves the overflow),
# plus slack.
made = 0
try:
    for i in range(2000):
        open(f"/out/f{i:04}.txt", "w").write("x")
        made += 1
except OSError as e:
    print("stopped after", made, type(e).__name__)
