"""Development tooling behind `./dev`: embedded servers, the demo and the test runner.

Nothing the application or its server image runs imports this package (.dockerignore leaves it
out of the image; tests/test_devtools_apart.py checks the imports).
"""
