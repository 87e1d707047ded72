// mtk-ckpt (in progress)
int main() { return 1; }
