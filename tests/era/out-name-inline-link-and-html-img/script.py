# A name as an inline link with a title, a reference-style link with its definition in
# another name, and an HTML image tag.
for name in [
    "[click](https:&#47;&#47;evil.example \"t\")",
    "[ref]",
    "[ref]: https:&#47;&#47;evil.example&#47;r",
    "<img src=https:&#47;&#47;evil.example&#47;i.png>",
]:
    with open("/out/" + name, "w") as f:
        f.write("x")
print("wrote the names")
