"""The correctness soak (``make soak``, ``python -m soak``): a mixed load against one real
server, every acknowledged write checked afterwards. A tool of its own beside ``bench/``,
whose server harness and machine facts it uses."""
