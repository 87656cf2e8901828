# If the result quotes a name in a code span, a name with backticks tries to close the
# span early and render the rest (an image) as markdown; leading and trailing spaces try
# the rule by which CommonMark strips one space from each end of a span.
for name in [
    "`![a](https:&#47;&#47;evil.example&#47;a.png)`",
    "``![b](https:&#47;&#47;evil.example&#47;b.png)",
    "```` ![c](https:&#47;&#47;evil.example&#47;c.png) ``",
    " `![d](https:&#47;&#47;evil.example&#47;d.png)` ",
    "\\`![e](https:&#47;&#47;evil.example&#47;e.png)",
]:
    with open("/out/" + name, "w") as f:
        f.write("x")
print("wrote the names")
