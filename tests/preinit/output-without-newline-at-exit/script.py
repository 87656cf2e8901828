# Output without a final newline, on both streams, and an exit code from sys.exit.
import sys

sys.stdout.write("no newline on stdout")
sys.stderr.write("no newline on stderr")
sys.exit(7)
