from dvstack.cli import main

main()
