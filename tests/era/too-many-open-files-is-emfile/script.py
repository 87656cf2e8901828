"""Opens files until the run's limit: real code's few hundred open files fit (at least
1,024), and the limit answers EMFILE ("Too many open files"), not EIO, so code that
handles running out of descriptors can tell. Closing some lets it go on."""
import errno

files = []
try:
    for i in range(4000):
        files.append(open(f"/out/f{i % 8}", "w"))
    print("no limit reached")
except OSError as e:
    print("opened at least 1024:", len(files) >= 1024)
    print("error:", errno.errorcode.get(e.errno), e.strerror)
for f in files[:100]:
    f.close()
with open("/out/after", "w") as f:
    f.write("reopened after closing")
print("reopened")
