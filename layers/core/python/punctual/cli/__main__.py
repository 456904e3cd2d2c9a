import sys

from punctual.cli import main

sys.exit(main())
