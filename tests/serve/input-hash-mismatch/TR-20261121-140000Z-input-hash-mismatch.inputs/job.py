print('not what was approved')
