for i in range(200):
    open(f"/out/f{i}.txt", "w").write("x")
print("made all")
