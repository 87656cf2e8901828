# File names are the guest's to choose and the result quotes them in its Safety Notes.
# Names that open an HTML comment, a tag, a processing instruction, or that try to cancel
# the escaping with a backslash: rendered raw, `<!--` would hide every line up to `-->`
# from a person reading the result. The result must quote them inert, in a code span
# (and pass verify and validate).
for name in ["<!--", "a <details> b", "x\\<!--y", "<?pi", "-->"]:
    with open("/out/" + name, "w") as f:
        f.write("x")
with open("/out/ok.txt", "w") as f:
    f.write("fine\n")
print("wrote names")
