# Audit 24.3: a name the runner must rename ("bad name" -> unsafe-name-N), then the
# name the renaming would pick, chosen by the guest itself. Collection used to fail on
# the clash and leave no result at all.
open("/out/bad name", "w").write("renamed\n")
open("/out/unsafe-name-1", "w").write("chosen by the guest\n")
print("wrote both")
