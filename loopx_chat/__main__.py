"""`python -m loopx_chat`: the same CLI as the `loopx-chat` console script."""

from loopx_chat.cli import main

if __name__ == "__main__":
    main()
