from ._app import main

main()
