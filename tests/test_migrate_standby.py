"""`migrate --force` on a hot standby says that it re-applied nothing (a standby takes no DDL):
never "function files re-applied". The standby is tests/test_standby.py's."""

from __future__ import annotations

import pgsift
import pytest
from pgsift import migrate
from pgsift.cli import main
from test_standby import replica, standby_socket  # noqa: F401 - fixtures


def test_migrate_force_on_a_standby_says_it_reapplied_nothing(db, replica, capsys):  # noqa: F811
    standby = replica()
    with pytest.raises(pgsift.MigrationError, match="read-only standby: --force re-applies nothing here"):
        migrate(standby, force=True)
    assert migrate(standby) == []                              # without force: checked, up to date
    info = standby.info
    url = f"postgresql://{info.user}@/{info.dbname}?host={info.host}&port={info.port}"
    assert main(["--dsn", url, "migrate", "--force"]) == 2
    out, err = capsys.readouterr()
    assert "re-applied" not in out and err.startswith("error: this server is a read-only standby: --force")
    assert "run migrate --force on the primary" in err
