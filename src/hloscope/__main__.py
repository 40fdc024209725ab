from ._cli._app import main

main()
