# A name holding line breaks: each would start a line of the result, here a heading, a
# setext underline and an image, if the quoting let a newline through.
for name in [
    "x\n## Safety Notes\n![z](https:&#47;&#47;evil.example&#47;n.png)",
    "y\r\n---\r\n<img src=x>",
    "tab\there\x0b\x0cvt",
]:
    with open("/out/" + name, "w") as f:
        f.write("x")
print("wrote the names")
