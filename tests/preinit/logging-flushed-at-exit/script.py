# logging registers logging.shutdown with atexit, which flushes and closes handlers.
import logging
import sys

handler = logging.FileHandler("/out/log.txt")
handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
log = logging.getLogger("fixture")
log.addHandler(handler)
log.setLevel(logging.INFO)
log.info("first")
log.warning("second")
print("logged", file=sys.stderr)
