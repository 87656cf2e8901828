import helper
print(helper.VALUE, helper.__file__)
