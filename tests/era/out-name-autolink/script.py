# Autolinks need no slash: a URI autolink and an e-mail autolink, each a link in any
# CommonMark renderer if the result quoted the name as prose.
for name in ["<https:evil.example?d=1>", "<exfil@evil.example>", "see <mailto:a@evil.example> now"]:
    with open("/out/" + name, "w") as f:
        f.write("x")
print("wrote the names")
