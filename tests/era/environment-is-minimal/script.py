import os
print(sorted(os.environ.keys()))
