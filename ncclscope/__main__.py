from ncclscope.cli import run

run()
