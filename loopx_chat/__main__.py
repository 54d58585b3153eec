"""`python -m loopx_chat`: the same CLI as the `loopx-chat` console script."""

from loopx_chat.cli import run

if __name__ == "__main__":
    run()
