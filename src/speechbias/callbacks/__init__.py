"""Lightning callbacks that turn predictions and fits into bias results and log them."""
