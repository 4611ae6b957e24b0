from drain.cli import main

main()
