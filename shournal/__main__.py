from shournal.cli import main

main()
