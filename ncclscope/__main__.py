from ncclscope.cli import main

main()
