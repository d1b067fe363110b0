"""The command line (relay/cli/): serve --workers, and the serve process under signals and
restarts.
"""
