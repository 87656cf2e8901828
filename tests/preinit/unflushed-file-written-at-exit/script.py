# A file opened for writing and never closed: its buffer reaches /out only when CPython
# finalises it at exit.
f = open("/out/unclosed.txt", "w")
f.write("written, buffered, never closed\n")
g = open("/out/closed.txt", "w")
g.write("closed\n")
g.close()
with open("/out/with.txt", "w") as h:
    h.write("closed by with\n")
print("done")
