def inner():
    raise KeyError("missing")

def outer():
    inner()

outer()
