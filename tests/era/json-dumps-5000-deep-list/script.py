"""json.dumps of a list nested 5,000 deep raises RecursionError, as natively: the C
encoder's recursion check must fire before either of the guest's stacks runs out."""
import json

nested = []
for _ in range(5000):
    nested = [nested]
try:
    json.dumps(nested)
    print("dumped")
except RecursionError as e:
    print("RecursionError:", e)
print("still running", len(json.dumps([[[1]]])))
