pytest_plugins = ["fixtures_pg", "fixtures_shell", "fixtures_store", "fixtures_cli",
                  "fixtures_sysctl", "fixtures_lineage", "fixtures_lab"]
