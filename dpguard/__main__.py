from __future__ import annotations

from dpguard.cli import main

raise SystemExit(main())
