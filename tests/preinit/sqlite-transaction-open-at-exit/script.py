# A sqlite3 connection with an open transaction when the script ends: CPython's exit
# closes it (its C type is finalised by deallocation, not by a __del__).
import sqlite3

con = sqlite3.connect("/out/db.sqlite")
con.execute("create table t (x)")
con.commit()
con.execute("insert into t values (1)")
print("transaction left open")
