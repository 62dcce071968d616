from services.app.cli import main

main()
